"""Naming the cause of contention: facts about workloads (``facts``), gathered live or from pasted artifacts
(``inputs``), judged by one rule per cause (``rules``) into findings with their fixes (``findings``), rendered as
text, JSON or HTML (``render``); ``comparison`` sets two diagnoses side by side and ``standing`` keeps the agent's
own findings as the metrics.FINDING series."""
