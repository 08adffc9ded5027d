// Starts Swagger UI on this server's OpenAPI document. A file of its own, not an inline
// script: the page's Content-Security-Policy runs scripts from this origin only.
window.addEventListener("DOMContentLoaded", function () {
  window.ui = SwaggerUIBundle({
    // beside /docs, under the issuer's path too behind a proxy that strips it (docs/operations.md)
    url: "openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    // The default sends the document to validator.swagger.io for a badge: nothing leaves this origin.
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    // Keys typed into "Authorize" stay in this tab's memory, never in localStorage.
    persistAuthorization: false,
  });
});
