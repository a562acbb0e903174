"""negutils: the library behind negbook. Notebooks narrate; everything testable lives here.

The package follows the book's data flow, one subpackage per stage::

    core         cache and atomic writes, result I/O, statistics, text helpers, oracle logic
    world        the embedded world: glyphs, alt-text captions, rendering, recaptioning, COCO-format
                 I/O, download recipes for real data
    models       weights and checkpoints, the backbone and its taps, pretraining, the feature cache
    benchmarks   NegBench MCQ / Retrieval-Neg, COCO-Confusion, FACTOR, VALSE, the suite, evaluation
    config       every profile and settings dataclass (one module)
    session      a profile's splits and backbone, opened in one call (one module)
    diagnosis    why CLIP fails at negation: LCD / alignment, bag-of-concepts, dilution, KTN's theory
    methods      the fixes: parsing, EC / KTN, LCSE, negation training data, NegFull, PeakPatch
    report       paper numbers, paper tables, verdicts, the unified table, performance
    experiments  the negation-rate experiment
    plots        the chapters' figures
    schedule     which chapters may run side by side: their needs, start order, time left (one module)
    dry_run      the gpu profile's inputs written from the embedded world, for its dry run (one module)
    run          executes the book
    eval         ``negbook eval``: any open_clip model on the benchmarks, from the command line

The rule: a module imports only from its own stage or an earlier one in this list, imports sit
at module level (a local import carries a comment saying why), and no import cycle exists.
``tests/test_layering.py`` checks all three.
"""
__version__ = "0.1.0"

STAGES = ("core", "world", "models", "benchmarks", "config", "session", "diagnosis", "methods", "report",
          "experiments", "plots", "schedule", "dry_run", "run", "eval")
