"""The panels of the icesink dashboard, one module per group of rows, in the order the board shows them."""
