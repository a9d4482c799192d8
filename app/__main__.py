import logging
import os
import sys

from app.cli import main

code = main()
# Every command has closed what it opened by now (the server its CLIs, store and streams).
# The interpreter's own teardown of the loaded modules would take another ~0.35 s of CPU on
# each exit, which every restart and every admin command pays: flush and leave instead.
logging.shutdown()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
