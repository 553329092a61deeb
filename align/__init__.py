"""deid_speech.align"""
