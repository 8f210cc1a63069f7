console.log("stellarator web example: the web layer lands with the web-layer issue");
