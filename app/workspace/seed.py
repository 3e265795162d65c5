"""Seed data: the demo account and workspace that `make run` creates on an empty database."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.accounts.service import create_user
from app.workspace.models import ImagePreset, Offer, Persona, VisualAsset

DEMO_EMAIL = "demo@loopdesk.local"
DEMO_PASSWORD = "loopdesk-demo"

OFFERS = [
    {
        "name": "Calm Mornings Coaching",
        "description": "A six-week coaching programme that helps busy founders build a "
        "calm, repeatable morning routine.",
        "audience": "Founders of small companies who start every day already behind.",
        "price": "$490",
        "brand_colors": ["#2f6f5e", "#f4d35e", "#fdfcf7"],
        "personas": [
            (
                "Overloaded Olivia",
                "Runs a 12-person agency; answers email in bed.",
                "Mornings vanish into other people's urgencies.",
                "Two focused hours before 10am.",
            ),
            (
                "Side-project Sam",
                "Engineer building a product at night.",
                "Tired, inconsistent, guilty about the gym.",
                "A routine that survives bad nights.",
            ),
        ],
    },
    {
        "name": "Trailhead Coffee Subscription",
        "description": "Small-batch roasted coffee delivered every two weeks, with tasting "
        "notes and a story from the farm.",
        "audience": "Home brewers who care where their beans come from.",
        "price": "$24 per bag",
        "brand_colors": ["#6b3e26", "#e8c07d", "#1d1d1b"],
        "personas": [
            (
                "Weekend Barista Ben",
                "Owns a hand grinder and three brewers.",
                "Supermarket beans taste flat.",
                "Discover a new origin each month.",
            ),
        ],
    },
    {
        "name": "Ledgerly Bookkeeping",
        "description": "Done-for-you monthly bookkeeping for freelancers and tiny studios.",
        "audience": "Freelance designers and developers who dread tax season.",
        "price": "$149 per month",
        "brand_colors": ["#1f3a93", "#9ad0ec", "#ffffff"],
        "personas": [
            (
                "Freelance Fatima",
                "Brand designer with eight retainer clients.",
                "Receipts in three inboxes, a shoebox and a phone.",
                "Never think about VAT again.",
            ),
        ],
    },
]

PRESETS = [
    ("Editorial photo", "Natural light, shallow depth of field, magazine framing.", "photo", "4:5"),
    ("Flat illustration", "Bold shapes, two or three brand colours, no gradients.", "flat", "1:1"),
    ("Story vertical", "Full-bleed vertical for stories and reels.", "photo", "9:16"),
]


def seed_presets(session: Session) -> None:
    if session.scalar(select(func.count()).select_from(ImagePreset)):
        return
    for name, description, style, ratio in PRESETS:
        session.add(
            ImagePreset(name=name, description=description, style=style, aspect_ratio=ratio)
        )


def seed_workspace(session: Session, user: User) -> None:
    for spec in OFFERS:
        offer = Offer(
            user_id=user.id,
            name=spec["name"],
            description=spec["description"],
            audience=spec["audience"],
            price=spec["price"],
            brand_colors=spec["brand_colors"],
        )
        session.add(offer)
        session.flush()
        for name, description, pains, goals in spec["personas"]:
            session.add(
                Persona(
                    user_id=user.id,
                    offer_id=offer.id,
                    name=name,
                    description=description,
                    pains=pains,
                    goals=goals,
                )
            )
        session.add(
            VisualAsset(
                user_id=user.id,
                offer_id=offer.id,
                title=f"{offer.name} hero image",
                prompt=f"Hero image for {offer.name}",
                preset="Editorial photo",
                meta={"colors": spec["brand_colors"], "placeholder": True},
            )
        )


def seed_demo(session: Session) -> tuple[User | None, bool]:
    """Create the demo admin and workspace when no account exists yet.

    Returns the demo user (None when other accounts exist and it does not) and whether
    anything was created. (The shared guidelines are
    the agents' business: the CLI seeds them beside this.)"""
    existing = session.scalar(select(User).where(User.email == DEMO_EMAIL))
    if existing is not None or session.scalar(select(func.count()).select_from(User)):
        seed_presets(session)
        return existing, False
    user = create_user(session, DEMO_EMAIL, DEMO_PASSWORD, is_admin=True)
    user.display_name = "Demo"
    seed_presets(session)
    seed_workspace(session, user)
    return user, True
