"""The one-machine stack: PostgreSQL and Redis of one-machine runs, the database roles, the owner's
connection, the settings `make run` records, and manage.py's entry point."""
