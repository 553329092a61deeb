"""deid_speech.eval"""
