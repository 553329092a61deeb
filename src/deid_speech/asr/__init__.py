"""deid_speech.asr"""
