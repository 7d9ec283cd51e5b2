"""The collision kernels, one module per family of shapes (``primitive``:
spheres, half-spaces, capsules; ``ellipsoid``; ``box``: bricks and
cylinders against those and each other face to face; ``convex``: the
support-function overlap of bricks, cylinders and ellipsoids;
``height_field``). A kernel maps two shapes and their poses in G to a
``PointContact`` with a fixed number of points; ``detection`` holds the
table of them and runs them."""
