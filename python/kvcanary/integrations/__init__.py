"""Integrations of kvcanary into inference engines, each behind a hook on the engine's own objects (no source edit).

* ``kvcanary.integrations.transformers``: HF transformers' continuous batching (``generate_batch`` and
  ``ContinuousBatchingManager``, transformers >= 5.17).
"""
