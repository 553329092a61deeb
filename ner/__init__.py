"""deid_speech.ner"""
