// Copy buttons: <button data-copy="#id"> copies the value (an input) or the text (a <pre>)
// of the element it names, and says so on the button for two seconds.
(function () {
  function say(button, words) {
    const label = button.firstChild;
    button.dataset.label = button.dataset.label || label.textContent;
    label.textContent = words;
    setTimeout(() => { label.textContent = button.dataset.label; }, 2000);
  }
  function select(source) {
    if (source.select) { source.select(); return; }
    const range = document.createRange();
    range.selectNodeContents(source);
    window.getSelection().removeAllRanges();
    window.getSelection().addRange(range);
  }
  document.addEventListener("click", async (event) => {
    const button = event.target.closest && event.target.closest("button[data-copy]");
    const source = button && document.querySelector(button.dataset.copy);
    if (!source) return;
    try {
      await navigator.clipboard.writeText("value" in source ? source.value : source.textContent);
      say(button, "Copied");
    } catch (error) {
      // No clipboard here (plain http on another host): select the text for Ctrl+C instead.
      select(source);
      say(button, "Selected: press Ctrl+C");
    }
  });
})();
