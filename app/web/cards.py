"""Answering questionnaire cards from the page (being written)."""

from flask import Blueprint

bp = Blueprint("cards", __name__)
