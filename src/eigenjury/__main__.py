import sys

from eigenjury.cli import main

sys.exit(main())
