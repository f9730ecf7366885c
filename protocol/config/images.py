"""Images a prompt or a push carries (pure: the bytes are given; reading a file is the
caller's, see :meth:`ImageInput.from_path`).

Rules:

1. The type is sniffed from the bytes, never taken from a file name: PNG, JPEG, GIF and WebP
   are accepted (what the Messages API takes); anything else is refused, naming what it looks
   like.
2. One image is at most :data:`MAX_IMAGE_BYTES` (the Messages API's limit per image), and one
   message at most :data:`MAX_IMAGES` images of :data:`MAX_MESSAGE_IMAGE_BYTES` together; over
   any, ``InvalidParamsError``.
3. A message with images is sent as content blocks: each image as a base64 ``image`` block,
   then the text.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias

import attrs

from claude_trio.protocol.errors import InvalidParamsError

MediaType: TypeAlias = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGES = 20
MAX_MESSAGE_IMAGE_BYTES = 20 * 1024 * 1024
"""All the images of one message together (the Messages API takes 32 MB per request)."""


def sniff_media_type(data: bytes) -> MediaType | None:
    """The image type of ``data`` by its magic bytes (rule 1), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _check_data(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bytes):
        raise InvalidParamsError("image", type(value).__name__, "bytes (or ImageInput.from_path)")
    if len(value) > MAX_IMAGE_BYTES:
        raise InvalidParamsError(
            "image", f"{len(value)} bytes", f"at most {MAX_IMAGE_BYTES} bytes per image"
        )
    if sniff_media_type(value) is None:
        raise InvalidParamsError(
            "image", repr(value[:8]), "a PNG, JPEG, GIF or WebP image (by its content)"
        )


@attrs.frozen(kw_only=True)
class ImageInput:
    """One image for the model. Build it with :meth:`from_bytes` or :meth:`from_path`."""

    data: bytes = attrs.field(validator=_check_data, repr=lambda d: f"<{len(d)} bytes>")
    source: str | None = None
    """Where it came from (a path), for messages; never sent."""

    @property
    def media_type(self) -> MediaType:
        media_type = sniff_media_type(self.data)
        assert media_type is not None  # checked at construction
        return media_type

    @classmethod
    def from_bytes(cls, data: bytes) -> ImageInput:
        return cls(data=data)

    @classmethod
    def from_path(cls, path: str | Path) -> ImageInput:
        """Read an image file (a clear error when it is missing or not an image)."""
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise InvalidParamsError(
                "image", str(path), f"a readable image file ({exc.strerror})"
            ) from None
        try:
            return cls(data=data, source=str(path))
        except InvalidParamsError as exc:
            raise InvalidParamsError("image", str(path), exc.allowed) from None

    def block(self) -> dict[str, Any]:
        """The Messages API ``image`` content block (rule 3)."""
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": self.media_type,
                "data": base64.b64encode(self.data).decode("ascii"),
            },
        }


def check_images(images: object, field: str = "images") -> tuple[ImageInput, ...]:
    """A tuple of :class:`ImageInput` (rule 2), or ``InvalidParamsError``."""
    if not isinstance(images, Sequence) or isinstance(images, str | bytes):
        raise InvalidParamsError(field, images, "a list of ImageInput")
    if len(images) > MAX_IMAGES:
        raise InvalidParamsError(field, f"{len(images)} images", f"at most {MAX_IMAGES}")
    for image in images:
        if not isinstance(image, ImageInput):
            raise InvalidParamsError(
                field, image, "ImageInput values (ImageInput.from_path / from_bytes)"
            )
    total = sum(len(image.data) for image in images)
    if total > MAX_MESSAGE_IMAGE_BYTES:
        raise InvalidParamsError(
            field, f"{total} bytes of images", f"at most {MAX_MESSAGE_IMAGE_BYTES} in one message"
        )
    return tuple(images)


def message_content(text: str, images: Sequence[ImageInput]) -> str | list[dict[str, Any]]:
    """What a user message's ``content`` is: the text alone, or image blocks then the text."""
    if not images:
        return text
    return [*(image.block() for image in images), {"type": "text", "text": text}]
