"""deid_speech.e2e"""
