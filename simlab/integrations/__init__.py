"""simlab's credit layer inside other trainers.

:mod:`.rows` reads a trainer's rows (one row per segment, keyed ``{uid}_{session_id}_{index}``) as a
:class:`~simlab.segments.SegmentBatch` and writes simlab's advantages and row weights back onto them;
it needs numpy only. :mod:`.batch_audit` reports what a dumped batch's aggregation does to each
rollout. :mod:`.verl` is the verl plugin (it imports verl). Nothing here imports a layer above the
credit layer, so that loading the plugin on every ``import verl`` stays light.
"""
