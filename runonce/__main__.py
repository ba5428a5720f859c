import sys

from runonce.ops.cli import main

sys.exit(main())
