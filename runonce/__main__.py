import sys

from runonce.cli import main

sys.exit(main())
