"""statecore's activities: thin adapters from Temporal to the core and the store.

Each class takes its dependencies (``WorkerResources``) in ``__init__``; the errors they raise
become Temporal failures in one place, ``statecore.activities._failures``."""
