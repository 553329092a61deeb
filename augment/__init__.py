"""deid_speech.augment"""
