"""Anchors that ingestion writes and retrieval reads, named once for both.

A source pointer's anchor identifies a chunk within its document (a heading path, a qualified
name); a source file of several chunks also has an outline, one more chunk that sums the file
up, whose anchor is :data:`FILE_OUTLINE_ANCHOR`.
"""

FILE_OUTLINE_ANCHOR = "__file__"
