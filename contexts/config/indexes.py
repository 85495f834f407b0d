"""The lexical index each node keeps, and the follower that keeps it on the change feed."""

from contexts.config.schema import BOOL, FLOAT, INT, PATH, TEXT, Area, Setting

AREA = Area("Lexical index", "Every node that serves retrieval keeps its own lexical index and "
            "follows the change feed into it (`contexts/indexes/follower.py`, ADR 0015).", (
    Setting("CONTEXTS_INDEX_DIR", PATH, None, "Directory of this node's lexical indexes.",
            shown_default="`$CONTEXTS_VAR_DIR/index`"),
    Setting("CONTEXTS_INDEX_FOLLOWER", BOOL, True,
            "Follow the change feed into the lexical index; `off` on a node that serves no "
            "retrieval (a worker node)."),
    Setting("CONTEXTS_NODE_NAME", TEXT, "",
            "This node's name in the follower table (pruning, /metrics); unique per index "
            "directory."),
    Setting("CONTEXTS_INDEX_FOLLOW_INTERVAL", FLOAT, 0.2,
            "Seconds between the follower's looks for changes."),
    Setting("CONTEXTS_INDEX_MAX_LAG", FLOAT, 10.0,
            "Seconds an index may be behind before retrievals say so in `degraded` and /readyz "
            "answers 503."),
    Setting("CONTEXTS_FEED_FOLLOWER_TTL_HOURS", INT, 24,
            "Feed rows are pruned once every follower seen within this many hours has passed "
            "them."),
    Setting("CONTEXTS_FEED_RETENTION_DAYS", INT, 7,
            "Feed rows are pruned after this many days whatever the followers (a node further "
            "behind rebuilds)."),
))
