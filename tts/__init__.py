"""deid_speech.tts"""
