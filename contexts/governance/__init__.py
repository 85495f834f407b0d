"""Governance: keeping the knowledge base true over time.

* :mod:`.staleness` — which fragments are probably stale, and why (``{code, detail}``);
* :mod:`.lineage` — which fragments share a lineage (the only pairs compared for contradictions);
* :mod:`.detector` — is an older fragment contradicted by a newer one of its lineage (pure),
  with :mod:`.text_rules` (prose, code, test, generated, log) and :mod:`.contradictions` (the
  deterministic sentence-level "the newer text says otherwise");
* :mod:`.staleness_eval` — the detector's precision and recall on the labelled pairs;
* :mod:`.nudges` — asking owners (and escalating to tech leads), answering by signed link;
* :mod:`.dedup_review` — near-duplicate proposals and curator merges;
* :mod:`.authority` — PageRank over citation links → ``Fragment.authority``;
* :mod:`.reembed` — model upgrades into a new embedding generation with a shadow window;
* :mod:`.supersession` — supersession chains for the console;
* :mod:`.report` — the numbers on the governance page; :mod:`.views` — the pages;
* :mod:`.similarity` — SimHash and cosine pairs within a home scope (dedup review);
* :mod:`.clock` — ``now``.

Every rule takes ``now`` so that tests (and replays) run on a fixed clock. See
``docs/governance.md``.
"""
