"""The conformance suite: environments and scripts written elsewhere (Gymnasium, PettingZoo, Grid2Op,
palaestrai-environments, MIDAS) or the way users write them (processes, threads, event loops,
prints, slow starts, scripts without a ``__main__`` guard), run unchanged with the default
subprocess workers: train, then test, the episodes in the store, no traceback, no orphan."""
