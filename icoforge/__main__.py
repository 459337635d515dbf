import sys

from icoforge.cli.main import main

sys.exit(main())
