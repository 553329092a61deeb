import sys

from deid_speech.cli import main

sys.exit(main())
