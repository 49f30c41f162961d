"""The request bodies of the server (pydantic 2 models; what FastAPI validates and documents).

Types are strict: a string where a number belongs (``"0.9"``), a boolean as a number, a
number as a string, NaN or infinity (Python's JSON reader accepts ``NaN``) are 422, never
coerced. Unknown keys of a passage, an item, a response or a claim are ignored (as the
command line ignores them: retrievers attach their own metadata); an unknown top-level key
is 422 (a typo of ``items`` or ``dropped`` must not be silently dropped).
"""

from __future__ import annotations

from typing import Annotated, Any, Optional, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, field_validator

__all__ = ["Passage", "DefendItem", "DefendRequest", "ScoredClaimIn", "ScoredResponse", "FilterRequest"]

#: A finite JSON number (an int or a float, never a bool, a string, NaN or infinity).
Number = Annotated[float, Field(strict=True, allow_inf_nan=False)]
#: An item's or a response's ``id``: echoed in its record.
ItemId = Optional[Union[StrictStr, StrictInt]]


class Passage(BaseModel):
    """One retrieved passage: what :class:`~rrag_kernels.pipelines.mirage.MirageDefense` reads."""

    model_config = ConfigDict(extra="ignore")

    text: StrictStr
    url: Optional[StrictStr] = None
    title: Optional[StrictStr] = None
    retrieval_score: Optional[Number] = None


class DefendItem(BaseModel):
    """One question and its retrieved passages (one line of ``rrag defend``'s input)."""

    model_config = ConfigDict(extra="ignore")

    id: ItemId = None
    question: StrictStr
    passages: list[Passage]

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a non-empty string")
        return value

    def row(self) -> dict[str, Any]:
        """The item as the dict :meth:`MirageDefense.defend_batch` and the CLI's records read."""
        return {"id": self.id, "question": self.question, "passages": [p.model_dump() for p in self.passages]}


class DefendRequest(BaseModel):
    """``POST /defend``: ``{"items": [...], "dropped"?: false}``."""

    model_config = ConfigDict(extra="forbid")

    items: list[DefendItem]
    dropped: StrictBool = Field(False, description="also return the dropped claims with their reasons")


class ScoredClaimIn(BaseModel):
    """One claim and its score (``text``, or the released datasets' ``subclaim``)."""

    model_config = ConfigDict(extra="ignore")

    text: StrictStr = Field(validation_alias=AliasChoices("text", "subclaim"))
    score: Number


class ScoredResponse(BaseModel):
    """One response's scored claims (``group`` for a group-conditional calibration)."""

    model_config = ConfigDict(extra="ignore")

    id: ItemId = None
    prompt: StrictStr = Field("", validation_alias=AliasChoices("prompt", "question"))
    group: Optional[Union[StrictStr, StrictInt]] = None
    claims: list[ScoredClaimIn]


class FilterRequest(BaseModel):
    """``POST /filter``: ``{"responses": [...]}``."""

    model_config = ConfigDict(extra="forbid")

    responses: list[ScoredResponse]
