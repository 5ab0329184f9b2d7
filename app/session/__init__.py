"""One interpretation session, whoever drives it (the command line, the window, the cloud server).

- ``options``: what the user asked for (``SessionOptions``);
- ``tuning``: every latency/quality default in one table, with the measurement behind it;
- ``models``: resolve the pair, load and warm the models (``LoadedModels``);
- ``build``: wire the models into a local ``RunningSession`` (streaming pipeline or serial cascade);
- ``runner``: source → running session → sinks → summary, the one loop every session runs;
- ``summary`` and ``outputs``: what a session leaves behind (the summary dict, SRT/VTT, the dub).

Qt-free (an import-linter contract in pyproject.toml holds it to that).
"""
