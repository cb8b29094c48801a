"""Code that only the tests, the benchmarks and the docs use, kept out of the package: the offline measure of
updates that land on bf16 weights (:mod:`tools.realized`) and the Markdown tables the docs hold
(:mod:`tools.doc_tables`). Import it from the repository's root (the tests' ``pythonpath``; a benchmark puts the
root on ``sys.path``)."""
