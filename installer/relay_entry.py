"""Entry point of the frozen app: the same `relay` command line as the installed package."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.main import main

    sys.exit(main())
