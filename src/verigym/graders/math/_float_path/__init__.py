"""The float path, in the calling process and without sympy: expressions, lists, tuples, sets,
matrices and named values sampled in Python floats that carry rigorous error bounds. ``_sampled``
(the path's entry), ``_sampledexpr`` (one expression at the full check's sampling points),
``_sampledcmp`` (the values' comparison), ``_intervals`` (unions of intervals with constant ends),
``_bounded`` (floats with error bounds). Where the bounds cannot vouch for a verdict it defers to
the full check."""
