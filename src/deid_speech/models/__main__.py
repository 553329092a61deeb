from deid_speech.models import main

main()
