"""Stand-ins for the services a town talks to, for tests and benches; town never imports them."""
