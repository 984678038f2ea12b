"""`python -m serving ...` == `python -m serving.server ...`."""
import sys

from serving.server import main

sys.exit(main())
