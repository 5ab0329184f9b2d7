"""Entry point of the frozen app: the same `relay` command line as the installed package."""

import multiprocessing

if __name__ == "__main__":
    multiprocessing.freeze_support()
    from app.main import entry

    entry()
