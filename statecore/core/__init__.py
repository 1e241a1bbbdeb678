"""The pure core: statecore's data, errors, token counting, context assembly, compaction, the
control plane, bundles and the turn commit. Nothing here imports Temporal; the store is the
only I/O it knows, through the ``StateStore`` contract."""
