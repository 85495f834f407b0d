"""Governance: keeping the knowledge base true over time.

* :mod:`.staleness` — which fragments are probably stale, and why (``{code, detail}``);
* :mod:`.contradictions` — the deterministic "these two similar texts disagree" detector;
* :mod:`.nudges` — asking owners (and escalating to tech leads), answering by signed link;
* :mod:`.dedup_review` — near-duplicate proposals and curator merges;
* :mod:`.authority` — PageRank over citation links → ``Fragment.authority``;
* :mod:`.reembed` — model upgrades into a new embedding generation with a shadow window;
* :mod:`.supersession` — supersession chains for the console;
* :mod:`.report` — the numbers on the governance page; :mod:`.views` — the pages;
* :mod:`.similarity` — SimHash and cosine pairs within a home scope; :mod:`.clock` — ``now``.

Every rule takes ``now`` so that tests (and replays) run on a fixed clock. See
``docs/governance.md``.
"""
