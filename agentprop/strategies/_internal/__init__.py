"""Implementation of agentprop's Hypothesis strategies (public API: ``agentprop.strategies``).

* :mod:`.slots` -- protected-slot detection and masking
* :mod:`.packs` -- phrase packs (YAML in ``agentprop/strategies/packs/``), validation and merging
* :mod:`.paraphrase` -- paraphrase transforms and the :func:`paraphrases` strategy

This package re-exports nothing: importing one of its modules (the paraphrase transforms a run
applies) loads that module's imports only, not every strategy's (the model-written pool, the
model API client, the spec's solver). Import a name from the module that defines it.
"""
