"""Derived indexes kept in step with PostgreSQL: vectors and the lexical index (indexing), and
the follower that keeps each node's lexical index on the change feed (ADR 0015)."""
