// Question cards (templates/chat/_card.html): progressive enhancement.
// Without this file every step is visible and the form posts normally. With it, a
// multi-step card shows one step at a time (Back / Next, then a summary to check before
// sending), choices are checked with the browser's own constraint validation, and a new
// card takes the focus. User text is only ever written with textContent.
"use strict";

window.LoopdeskCards = window.LoopdeskCards || (function () {
  var CARD = ".card-q";
  var STEP = "[data-card-step]";
  var CHOICE = "input[type=radio], input[type=checkbox]";
  var FIELDS = "input:not([type=hidden]), textarea, select";
  var pendingFocus = null; // the card whose own form was just sent

  function each(list, fn) {
    Array.prototype.forEach.call(list, fn);
  }

  function cardsIn(root) {
    var found = [];
    if (root.matches && root.matches(CARD)) found.push(root);
    if (root.querySelectorAll) each(root.querySelectorAll(CARD), function (c) { found.push(c); });
    return found;
  }

  function stepsOf(card) {
    return Array.prototype.slice.call(card.querySelectorAll(STEP));
  }

  function fieldsOf(step) {
    return Array.prototype.slice.call(step.querySelectorAll(FIELDS));
  }

  function choicesOf(step) {
    return Array.prototype.slice.call(step.querySelectorAll(CHOICE));
  }

  function freeTextOf(step) {
    return step.querySelector(".card-free input");
  }

  // --- validity: rules the markup alone cannot say --------------------------------------

  function syncValidity(step) {
    var required = step.getAttribute("data-required") === "true";
    var kind = step.getAttribute("data-input");
    var choices = choicesOf(step);
    var free = freeTextOf(step);
    choices.forEach(function (input) { input.setCustomValidity(""); });
    if (free) free.setCustomValidity("");
    if (kind === "text") {
      var area = step.querySelector("textarea");
      if (area) {
        area.setCustomValidity(
          required && area.value.length > 0 && !area.value.trim() ? "Please write an answer." : ""
        );
      }
      return;
    }
    if (!required || !choices.length) return;
    var chosen = choices.some(function (input) { return input.checked; });
    var typed = free && free.value.trim() !== "";
    if (chosen || typed) return;
    if (kind === "multi") {
      choices[0].setCustomValidity("Please choose at least one.");
    } else if (free) {
      choices[0].setCustomValidity("Please choose one or type an answer.");
    }
    // A plain required radio group: the `required` attribute already says it.
  }

  function firstInvalid(step) {
    syncValidity(step);
    return fieldsOf(step).filter(function (field) {
      return field.willValidate && !field.checkValidity();
    })[0] || null;
  }

  // --- focus ---------------------------------------------------------------------------

  function focusStep(step) {
    var choices = choicesOf(step);
    var checked = choices.filter(function (input) { return input.checked; })[0];
    var target = checked || fieldsOf(step)[0];
    if (target) target.focus();
  }

  function isTyping() {
    var active = document.activeElement;
    if (!active || active === document.body) return false;
    if (active.closest && active.closest(CARD)) return false;
    // Someone writing elsewhere (the composer, say) keeps the focus; an empty field does not.
    if (active.isContentEditable) return true;
    return /^(INPUT|TEXTAREA)$/.test(active.tagName) && typeof active.value === "string" &&
      active.value.trim() !== "";
  }

  // --- one step at a time --------------------------------------------------------------

  function Wizard(card) {
    this.card = card;
    this.form = card.querySelector("form");
    this.steps = stepsOf(card);
    this.review = card.querySelector("[data-card-review]");
    this.list = card.querySelector("[data-card-review-list]");
    this.back = card.querySelector("[data-card-back]");
    this.next = card.querySelector("[data-card-next]");
    this.submit = card.querySelector("[data-card-submit]");
    this.current = 0;
  }

  Wizard.prototype.reviewing = function () {
    return this.current === this.steps.length;
  };

  Wizard.prototype.show = function (index) {
    this.current = index;
    this.steps.forEach(function (step, i) { step.hidden = i !== index; });
    this.review.hidden = !this.reviewing();
    this.back.hidden = index === 0;
    this.next.hidden = this.reviewing();
    this.submit.hidden = !this.reviewing();
    this.card.setAttribute("data-current-step", String(index));
  };

  Wizard.prototype.goTo = function (index) {
    this.show(index);
    if (this.reviewing()) {
      this.buildReview();
      this.review.querySelector("h3").focus();
    } else {
      focusStep(this.steps[index]);
    }
  };

  Wizard.prototype.forward = function () {
    if (this.reviewing()) return;
    var invalid = firstInvalid(this.steps[this.current]);
    if (invalid) {
      invalid.reportValidity();
      return;
    }
    this.goTo(this.current + 1);
  };

  Wizard.prototype.backward = function () {
    if (this.current > 0) this.goTo(this.current - 1);
  };

  Wizard.prototype.firstInvalidStep = function () {
    for (var i = 0; i < this.steps.length; i++) {
      if (firstInvalid(this.steps[i])) return i;
    }
    return -1;
  };

  Wizard.prototype.buildReview = function () {
    var list = this.list;
    var wizard = this;
    while (list.firstChild) list.removeChild(list.firstChild);
    this.steps.forEach(function (step, index) {
      var term = document.createElement("dt");
      term.textContent = step.getAttribute("data-title") || "";
      var detail = document.createElement("dd");
      var answer = document.createElement("span");
      var labels = answersOf(step);
      answer.textContent = labels.length ? labels.join(", ") : "No answer";
      if (!labels.length) answer.className = "muted";
      var change = document.createElement("button");
      change.type = "button";
      change.className = "link card-change";
      change.textContent = "Change";
      change.setAttribute("aria-label", "Change: " + term.textContent);
      change.addEventListener("click", function () { wizard.goTo(index); });
      detail.appendChild(answer);
      detail.appendChild(document.createTextNode(" "));
      detail.appendChild(change);
      list.appendChild(term);
      list.appendChild(detail);
    });
  };

  function answersOf(step) {
    var free = freeTextOf(step);
    if (free && free.value.trim()) return [free.value.trim()];
    var area = step.querySelector("textarea");
    if (area) return area.value.trim() ? [area.value.trim()] : [];
    return choicesOf(step)
      .filter(function (input) { return input.checked; })
      .map(function (input) {
        var label = input.closest("label");
        var text = label && label.querySelector(".card-option-label");
        return text ? text.textContent.trim() : input.value;
      });
  }

  Wizard.prototype.start = function () {
    var wizard = this;
    var errorStep = this.steps.filter(function (s) { return s.hasAttribute("data-has-error"); })[0];
    if (errorStep) {
      this.show(this.steps.indexOf(errorStep));
    } else if (this.form.hasAttribute("aria-describedby") && this.firstInvalidStep() === -1) {
      // Refused as a whole (not one step): back to the summary, under the message.
      this.show(this.steps.length);
      this.buildReview();
    } else {
      this.show(0);
    }
    this.next.addEventListener("click", function () { wizard.forward(); });
    this.back.addEventListener("click", function () { wizard.backward(); });
    // Sending from the summary: a step that became invalid is shown, not silently blocked.
    this.submit.addEventListener("click", function (event) {
      var bad = wizard.firstInvalidStep();
      if (bad === -1) return;
      event.preventDefault();
      wizard.show(bad);
      var invalid = firstInvalid(wizard.steps[bad]);
      if (invalid) invalid.reportValidity();
    });
    // Enter in a field moves on rather than sending the whole card early.
    this.form.addEventListener("keydown", function (event) {
      if (event.key !== "Enter" || event.isComposing || wizard.reviewing()) return;
      var target = event.target;
      if (target.tagName !== "INPUT" || /^(submit|button|reset)$/.test(target.type)) return;
      event.preventDefault();
      wizard.forward();
    });
  };

  Wizard.prototype.focusFirst = function () {
    if (this.reviewing()) this.review.querySelector("h3").focus();
    else focusStep(this.steps[this.current]);
  };

  // --- enhancing a card once -----------------------------------------------------------

  function enhance(card) {
    if (card.getAttribute("data-enhanced") === "true") return card._loopdeskWizard || null;
    card.setAttribute("data-enhanced", "true");
    var form = card.querySelector("form");
    if (!form) return null;
    var steps = stepsOf(card);
    steps.forEach(syncValidity);
    form.addEventListener("input", onEdit);
    form.addEventListener("change", onEdit);
    var wizard = null;
    if (steps.length > 1 && card.querySelector("[data-card-review]")) {
      wizard = new Wizard(card);
      wizard.start();
    }
    card._loopdeskWizard = wizard;
    return wizard;
  }

  function onEdit(event) {
    var target = event.target;
    var step = target.closest && target.closest(STEP);
    if (!step) return;
    var free = freeTextOf(step);
    if (free && target === free && free.value.trim()) {
      // A typed answer replaces the choice (the server reads it the same way).
      choicesOf(step).forEach(function (input) { input.checked = false; });
    } else if (free && target.type === "radio" && target.checked) {
      free.value = "";
    }
    syncValidity(step);
  }

  function focusCard(card, wizard, ours) {
    if (card.getAttribute("data-status") !== "awaiting") {
      // Answered here: the person goes on in the message box (or stays on the card).
      var composer = ours ? document.getElementById("composer-input") : null;
      (composer || card).focus();
      return;
    }
    if (wizard) {
      wizard.focusFirst();
      return;
    }
    var steps = stepsOf(card);
    var errorStep = steps.filter(function (s) { return s.hasAttribute("data-has-error"); })[0];
    if (errorStep || steps[0]) focusStep(errorStep || steps[0]);
  }

  function newestAwaiting() {
    var all = document.querySelectorAll(CARD + '[data-status="awaiting"]');
    return all.length ? all[all.length - 1] : null;
  }

  // Focus once the page has settled: rows may still be re-ordered or de-duplicated right
  // after a swap (moving a focused element drops its focus).
  function focusLater(id, ours) {
    window.setTimeout(function () {
      var card = document.getElementById(id);
      if (!card) return;
      if (!ours && (card !== newestAwaiting() || isTyping())) return;
      if (card.contains(document.activeElement)) return;
      var wizard = card.getAttribute("data-status") === "awaiting" ? enhance(card) : null;
      focusCard(card, wizard, ours);
    }, 30);
  }

  function enhanceWithin(root) {
    var newest = newestAwaiting();
    cardsIn(root || document).forEach(function (card) {
      var fresh = card.getAttribute("data-enhanced") !== "true";
      if (card.getAttribute("data-status") === "awaiting") enhance(card);
      if (pendingFocus && card.id === pendingFocus) {
        pendingFocus = null;
        focusLater(card.id, true);
      } else if (fresh && card === newest && !isTyping()) {
        focusLater(card.id, false);
      }
    });
  }

  // --- wiring --------------------------------------------------------------------------

  function requestingCard(event) {
    var detail = event.detail || {};
    var elt = (detail.requestConfig && detail.requestConfig.elt) || detail.elt || event.target;
    return elt && elt.closest ? elt.closest(CARD) : null;
  }

  // A card refused with 400 (a wrong answer) or 409 (already answered) comes back as the
  // card again, showing why: swap it in although htmx leaves 4xx answers alone.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var detail = event.detail;
    if (!detail || !detail.xhr || !requestingCard(event)) return;
    var status = detail.xhr.status;
    if ((status === 400 || status === 409) && detail.xhr.getResponseHeader("HX-Reswap") !== "none") {
      detail.shouldSwap = true;
      detail.isError = false;
    }
  });

  document.addEventListener("htmx:beforeRequest", function (event) {
    var card = requestingCard(event);
    if (card) {
      pendingFocus = card.id;
      card.setAttribute("aria-busy", "true");
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var card = requestingCard(event);
    if (card) card.removeAttribute("aria-busy");
  });

  function boot() {
    enhanceWithin(document);
  }

  if (window.htmx && typeof window.htmx.onLoad === "function") {
    window.htmx.onLoad(function (elt) { enhanceWithin(elt); });
  } else {
    document.addEventListener("htmx:load", function (event) {
      enhanceWithin(event.detail && event.detail.elt ? event.detail.elt : event.target);
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", boot);
  } else {
    boot();
  }

  return { enhance: enhance, enhanceWithin: enhanceWithin };
})();
