"""The papers' experiments: the gather experiment of Takata et al. (``gather``), and Park et al.'s
believability interviews (``believability``) and society measures (``society``)."""
