"""The writes under the one door (``contexts.usecases``): versioned fragment writes and pins, the
secret screen every stored text passes, the audit trail, the change feed, job leases, traces,
the row-level-security context, uploads and the use counters. Adapters never import these
(the ``one-door`` contract); use cases, tasks and the domain do."""
