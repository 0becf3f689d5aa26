"""The shapes a decision's tests hold their level for, one module each, found by
`procedures.SHAPES` on its first lookup."""
