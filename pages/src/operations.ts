// Every GraphQL document the hosted pages send, in one place, so a test can check each one
// against schema.graphql.

const ERR = `__typename ... on Error { message }`;
const IDENTIFIER = `id kind value origin externalProfile { providerName email name }`;
const TOKENS = `... on SignInTokens { accessToken idToken accountId expiresIn }`;
const PASSKEYS = `edges { node { id name createdAt lastUsedAt backedUp } }`;

export const OPERATIONS = {
  StartSignIn: `mutation StartSignIn($email: String, $phone: String) {
    startSignIn(email: $email, phone: $phone) { ${ERR} ... on OtpChallenge { stateId } }
  }`,
  CompleteSignIn: `mutation CompleteSignIn($stateId: String!, $otp: String!) {
    completeSignIn(stateId: $stateId, otp: $otp) { ${ERR} ${TOKENS} }
  }`,
  StartPasskeySignIn: `mutation StartPasskeySignIn { startPasskeySignIn }`,
  FinishPasskeySignIn: `mutation FinishPasskeySignIn($response: JSON!) {
    finishPasskeySignIn(response: $response) { ${ERR} ${TOKENS} }
  }`,
  SignOut: `mutation SignOut { signOut }`,
  StartReauthentication: `mutation StartReauthentication($email: String, $phone: String) {
    startReauthentication(email: $email, phone: $phone) { ${ERR} ... on OtpChallenge { stateId } }
  }`,
  CompleteReauthentication: `mutation CompleteReauthentication($stateId: String!, $otp: String!) {
    completeReauthentication(stateId: $stateId, otp: $otp) { ${ERR} ${TOKENS} }
  }`,
  ReauthenticateWithPasskey: `mutation ReauthenticateWithPasskey($response: JSON!) {
    reauthenticateWithPasskey(response: $response) { ${ERR} ${TOKENS} }
  }`,
  Viewer: `query Viewer {
    viewer {
      id name email phoneNumber
      identifiers { ${IDENTIFIER} leavesOnUnmerge }
      mergedSecondary { id name email phoneNumber mergedAt identifiers { ${IDENTIFIER} } passkeys(first: 50) { ${PASSKEYS} } }
      passkeys(first: 50) { ${PASSKEYS} }
      sessions(first: 50) { edges { node { id createdAt authMethod lastUsedAt clientAddress userAgent current } } }
      authorizedApps { clientId name scopes allowedAt }
    }
  }`,
  RequestLink: `mutation RequestLink($email: String, $phone: String) {
    requestLink(email: $email, phone: $phone) { ${ERR} ... on OtpChallenge { stateId } }
  }`,
  VerifyLink: `mutation VerifyLink($stateId: String!, $otp: String!) {
    verifyLink(stateId: $stateId, otp: $otp) { __typename ... on VerifyLinkPayload { outcome } ... on Error { message } }
  }`,
  RemoveLink: `mutation RemoveLink($email: String, $phone: String, $external: String) {
    removeLink(email: $email, phone: $phone, external: $external) { ${ERR} }
  }`,
  StartExternalSignIn: `mutation StartExternalSignIn($provider: String!, $redirectUri: String!) {
    startExternalSignIn(provider: $provider, redirectUri: $redirectUri) { ${ERR} ... on ExternalStart { stateId authorizationUrl } }
  }`,
  CompleteExternalSignIn: `mutation CompleteExternalSignIn($stateId: String!, $code: String!) {
    completeExternalSignIn(stateId: $stateId, code: $code) {
      ${ERR}
      ... on ExternalSignInOutcome { tokens { accessToken idToken accountId expiresIn } emailVerification { stateId destination } }
    }
  }`,
  ConfirmExternalSignIn: `mutation ConfirmExternalSignIn($stateId: String!, $otp: String!) {
    confirmExternalSignIn(stateId: $stateId, otp: $otp) { ${ERR} ${TOKENS} }
  }`,
  ConfirmExternalSignInWithPasskey: `mutation ConfirmExternalSignInWithPasskey($stateId: String!, $response: JSON!) {
    confirmExternalSignInWithPasskey(stateId: $stateId, response: $response) { ${ERR} ${TOKENS} }
  }`,
  StartExternalReauthentication: `mutation StartExternalReauthentication($provider: String!, $redirectUri: String!) {
    startExternalReauthentication(provider: $provider, redirectUri: $redirectUri) { ${ERR} ... on ExternalStart { stateId authorizationUrl } }
  }`,
  CompleteExternalReauthentication: `mutation CompleteExternalReauthentication($stateId: String!, $code: String!) {
    completeExternalReauthentication(stateId: $stateId, code: $code) { ${ERR} ${TOKENS} }
  }`,
  StartExternalLink: `mutation StartExternalLink($provider: String!, $redirectUri: String!) {
    startExternalLink(provider: $provider, redirectUri: $redirectUri) { ${ERR} ... on ExternalStart { stateId authorizationUrl } }
  }`,
  VerifyExternalLink: `mutation VerifyExternalLink($stateId: String!, $code: String!) {
    verifyExternalLink(stateId: $stateId, code: $code) { __typename ... on VerifyLinkPayload { outcome } ... on Error { message } }
  }`,
  Unmerge: `mutation Unmerge { unmerge { ${ERR} } }`,
  StartPasskeyRegistration: `mutation StartPasskeyRegistration {
    startPasskeyRegistration { ${ERR} ... on PasskeyCreationOptions { options } }
  }`,
  FinishPasskeyRegistration: `mutation FinishPasskeyRegistration($response: JSON!, $name: String) {
    finishPasskeyRegistration(response: $response, name: $name) { ${ERR} ... on Passkey { id name createdAt lastUsedAt backedUp } }
  }`,
  RenamePasskey: `mutation RenamePasskey($id: ID!, $name: String!) {
    renamePasskey(id: $id, name: $name) { ${ERR} ... on Passkey { id name } }
  }`,
  RemovePasskey: `mutation RemovePasskey($id: ID!) {
    removePasskey(id: $id) { ${ERR} ... on RemovePasskeyPayload { removedId } }
  }`,
  EndSession: `mutation EndSession($id: ID!) {
    endSession(id: $id) { ${ERR} ... on EndSessionsPayload { ended } }
  }`,
  RevokeOAuthConsent: `mutation RevokeOAuthConsent($clientId: String!) {
    revokeOAuthConsent(clientId: $clientId) { ${ERR} }
  }`,
  EndOtherSessions: `mutation EndOtherSessions {
    endOtherSessions { ${ERR} ... on EndSessionsPayload { ended } }
  }`,
} as const;
