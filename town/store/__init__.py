"""The store: SQLModel tables, Alembic migrations and the unit of work."""
