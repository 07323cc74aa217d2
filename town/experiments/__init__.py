"""The papers' experiments, run outside any town: the gather experiment of Takata et al."""
