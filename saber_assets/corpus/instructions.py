"""Corpus texts that read as instructions to a model: flagged, never dropped.

Every problem and solution goes into LLM prompts (the topic scorer, the summariser, the judge,
as the target or as a candidate). The prompts put each text in a tagged block said to be data
(``saber_resources/templates.py``), but a text that speaks to the model is worth a person's
look: it may steer a judge that obeys it anyway. Each rule is a regular expression over one
field; a row is flagged once per rule that matches, with the matching words.

- ``addresses_a_model``: tells a model to ignore or forget its instructions, or names it
  ("you are an AI / assistant / judge", "system prompt").
- ``choice_directive``: asks for an answer, a choice or a preference naming a sample or a
  candidate ("answer with this candidate", "choose sample 2").
- ``boxed_choice``: a boxed 1 or 2 in a text that also names sample or candidate 1 or 2 — the
  judge's own answer format, as a planted answer would write it.
"""

from __future__ import annotations

import polars as pl

RULES = {
    "addresses_a_model": (
        r"(?i)\b(ignore|disregard|forget)\b[^.\n]{0,40}\b(instructions?|prompt|rules)\b"
        r"|\byou are (an? |the )?(ai|assistant|language model|llm|judge|grader)\b"
        r"|\bsystem prompt\b|\bas an ai\b"
    ),
    "choice_directive": (
        r"(?i)\b(answer|respond|reply|output|choose|pick|select|prefer|vote)\b[^.\n]{0,30}?"
        r"\b((sample|candidate)\s*[12]\b|(this|that|the first|the second)\s+(sample|candidate)\b)"
    ),
    "boxed_choice": r"\\boxed\{\s*[12]\s*\}",
}
# boxed_choice also needs the text to name a sample or a candidate by number
NAMES_A_CHOICE = r"(?i)\b(sample|candidate)\s*[12]\b"
FIELDS = ("problem", "solution")


def instruction_like(corpus: pl.DataFrame) -> pl.DataFrame:
    """(id, field, flag, words): one row per field and rule that matched."""
    parts = []
    for field in FIELDS:
        if field not in corpus.columns:
            continue
        text = pl.col(field).fill_null("")
        for flag, pattern in RULES.items():
            hit = text.str.contains(pattern)
            if flag == "boxed_choice":
                hit = hit & text.str.contains(NAMES_A_CHOICE)
            found = corpus.filter(hit).select(
                "id",
                pl.lit(field).alias("field"),
                pl.lit(flag).alias("flag"),
                text.str.extract(f"({pattern})", 1).str.slice(0, 80).alias("words"),
            )
            parts.append(found)
    schema = {"id": pl.String, "field": pl.String, "flag": pl.String, "words": pl.String}
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).cast(schema).sort("id", "field", "flag")
