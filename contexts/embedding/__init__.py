"""The embedding model (one per namespace), its batching of concurrent queries, and the frames
the query encoder's child process speaks."""
